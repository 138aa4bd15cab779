//! stub
/// stub
pub struct HttpBackend;
