//! The long connection's wire format: every websocket message is one binary protobuf
//! `pbbp2.Frame` (`fixtures/ws_pbbp2.proto`, reconstructed from the official SDKs' generated
//! code).
//!
//! The struct is written out with prost's derive rather than generated at build time, so the
//! build needs no `protoc`; the unit tests check it byte for byte against frames the official
//! generated code produced. `method` 0 is control (`ping` / `pong`), 1 is data (`event` /
//! `card`); the kind and the fragmenting (`sum`, `seq`, `message_id`) travel as string headers.

use prost::Message;

/// A `pbbp2.Header`: one string key and value.
#[derive(Clone, PartialEq, Eq, Message)]
pub struct Header {
    /// The header's name (`type`, `message_id`, `sum`, `seq`, `trace_id`, `biz_rt`, ...).
    #[prost(string, required, tag = "1")]
    pub key: String,
    /// Its value.
    #[prost(string, required, tag = "2")]
    pub value: String,
}

/// A `pbbp2.Frame`.
#[derive(Clone, PartialEq, Eq, Message)]
pub struct Frame {
    /// Sequence id; acks echo it.
    #[prost(uint64, required, tag = "1")]
    pub seq_id: u64,
    /// Log id; acks echo it.
    #[prost(uint64, required, tag = "2")]
    pub log_id: u64,
    /// The `service_id` from the connection URL's query.
    #[prost(int32, required, tag = "3")]
    pub service: i32,
    /// [`METHOD_CONTROL`] or [`METHOD_DATA`].
    #[prost(int32, required, tag = "4")]
    pub method: i32,
    /// String headers: the frame's kind and, for data, its fragmenting.
    #[prost(message, repeated, tag = "5")]
    pub headers: Vec<Header>,
    /// Like HTTP `Content-Encoding`; unused by Feishu so far.
    #[prost(string, optional, tag = "6")]
    pub payload_encoding: Option<String>,
    /// Like HTTP `Content-Type`; unused by Feishu so far.
    #[prost(string, optional, tag = "7")]
    pub payload_type: Option<String>,
    /// The body: an event's JSON (or one fragment of it), a pong's client config, an ack.
    #[prost(bytes = "vec", optional, tag = "8")]
    pub payload: Option<Vec<u8>>,
    /// A newer log id, echoed like `log_id`.
    #[prost(string, optional, tag = "9")]
    pub log_id_new: Option<String>,
}

/// `method` of ping and pong frames.
pub const METHOD_CONTROL: i32 = 0;
/// `method` of event and card frames.
pub const METHOD_DATA: i32 = 1;

impl Frame {
    /// The first value of header `key`.
    pub fn header(&self, key: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|h| h.key == key)
            .map(|h| h.value.as_str())
    }

    /// The `type` header: `ping`, `pong`, `event` or `card`.
    pub fn kind(&self) -> &str {
        self.header("type").unwrap_or("")
    }

    /// A client ping for the connection's `service`.
    pub fn ping(service: i32) -> Frame {
        Frame {
            seq_id: 0,
            log_id: 0,
            service,
            method: METHOD_CONTROL,
            headers: vec![header("type", "ping")],
            payload_encoding: None,
            payload_type: None,
            payload: None,
            log_id_new: None,
        }
    }

    /// The acknowledgement of this data frame: the same frame back, with `biz_rt` (handling
    /// time in milliseconds) added and `{"code": <code>}` as its payload, as the SDKs send it.
    pub fn ack(&self, code: u16, biz_rt_ms: u128) -> Frame {
        let mut ack = self.clone();
        ack.headers.push(header("biz_rt", &biz_rt_ms.to_string()));
        ack.payload = Some(format!("{{\"code\": {code}}}").into_bytes());
        ack
    }

    /// The frame's protobuf bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.encode_to_vec()
    }

    /// Read a frame from protobuf bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Frame, prost::DecodeError> {
        Frame::decode(bytes)
    }
}

/// A header.
pub fn header(key: &str, value: &str) -> Header {
    Header {
        key: key.to_owned(),
        value: value.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    fn protocol() -> Value {
        let path = format!(
            "{}/fixtures/ws_long_connection_protocol.json",
            env!("CARGO_MANIFEST_DIR")
        );
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn our_ping_is_the_sdks_ping_byte_for_byte() {
        let p = protocol();
        let service = p["client_ping"]["service"].as_i64().unwrap() as i32;
        assert_eq!(
            Frame::ping(service).to_bytes(),
            hex(p["client_ping"]["hex"].as_str().unwrap())
        );
    }

    #[test]
    fn the_sdks_pong_and_event_frames_decode() {
        let p = protocol();
        let pong =
            Frame::from_bytes(&hex(p["server_pong_with_config"]["hex"].as_str().unwrap())).unwrap();
        assert_eq!(pong.method, METHOD_CONTROL);
        assert_eq!(pong.kind(), "pong");
        let config: Value = serde_json::from_slice(pong.payload.as_deref().unwrap()).unwrap();
        assert_eq!(config["PingInterval"], 120);

        let event_hex = p["server_data_frame_event"]["hex"].as_str().unwrap();
        let event = Frame::from_bytes(&hex(event_hex)).unwrap();
        assert_eq!(event.method, METHOD_DATA);
        assert_eq!(event.kind(), "event");
        assert_eq!(event.seq_id, 7);
        assert_eq!(event.log_id, 8_877_665_544);
        assert_eq!(event.header("message_id"), Some("ea1b2c3d4e5f"));
        assert_eq!(event.header("sum"), Some("1"));
        let body = std::str::from_utf8(event.payload.as_deref().unwrap()).unwrap();
        assert_eq!(
            body,
            p["server_data_frame_event"]["payload_utf8"]
                .as_str()
                .unwrap()
        );
    }

    #[test]
    fn our_ack_is_the_sdks_ack_byte_for_byte() {
        let p = protocol();
        let event =
            Frame::from_bytes(&hex(p["server_data_frame_event"]["hex"].as_str().unwrap())).unwrap();
        assert_eq!(
            event.ack(200, 12).to_bytes(),
            hex(p["client_ack_frame"]["hex"].as_str().unwrap())
        );
    }
}
