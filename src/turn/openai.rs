//! stub
/// stub
pub struct OpenAiBackend;
/// stub
pub struct OpenAiSettings;
