//! stub
/// stub
pub struct EchoBackend;
