//! stub
/// stub
pub struct CommandBackend;
