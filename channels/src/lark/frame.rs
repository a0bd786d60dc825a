//! The pbbp2 frame codec of the Lark/Feishu event long connection.
//!
//! Every websocket message of the long connection is one binary protobuf `pbbp2.Frame`
//! (proto2). The schema is the one of the official SDKs (larksuite/oapi-sdk-go `ws/pbbp2.pb.go`,
//! oapi-sdk-python `lark_oapi/ws/pb/pbbp2_pb2.py`):
//!
//! ```proto
//! message Header { required string key = 1; required string value = 2; }
//! message Frame {
//!   required uint64 SeqID = 1;  required uint64 LogID = 2;
//!   required int32 service = 3; required int32 method = 4;   // 0 control, 1 data
//!   repeated Header headers = 5;
//!   optional string payload_encoding = 6; optional string payload_type = 7;
//!   optional bytes payload = 8;           optional string LogIDNew = 9;
//! }
//! ```
//!
//! The four required fields are always encoded, even when zero: the Go SDK's decoder refuses a
//! frame without them (`RequiredNotSetError`). Unset optional fields are left out, as the Python
//! and Node SDKs do. What this module owns: the message types, encode/decode, and the frames the
//! client builds (ping, ACK). What it does not own: the connection ([`super::ws`]).

use prost::Message;
use serde::Serialize;

/// `method` of a control frame (ping, pong).
pub const METHOD_CONTROL: i32 = 0;
/// `method` of a data frame (event, card callback).
pub const METHOD_DATA: i32 = 1;

/// Header key: message type (`event`, `card`, `ping`, `pong`).
pub const HEADER_TYPE: &str = "type";
/// Header key: id shared by all fragments of one message.
pub const HEADER_MESSAGE_ID: &str = "message_id";
/// Header key: number of fragments (`"1"` when not split).
pub const HEADER_SUM: &str = "sum";
/// Header key: 0-based fragment index.
pub const HEADER_SEQ: &str = "seq";
/// Header key: trace id.
pub const HEADER_TRACE_ID: &str = "trace_id";
/// Header key the client adds to an ACK: handler time in milliseconds.
pub const HEADER_BIZ_RT: &str = "biz_rt";

/// One `pbbp2.Header`.
#[derive(Clone, PartialEq, Eq, Message)]
pub struct Header {
    #[prost(string, required, tag = "1")]
    pub key: String,
    #[prost(string, required, tag = "2")]
    pub value: String,
}

/// One `pbbp2.Frame`. Field names follow the proto (`SeqID` → `seq_id`, …).
#[derive(Clone, PartialEq, Eq, Message)]
pub struct Frame {
    #[prost(uint64, required, tag = "1")]
    pub seq_id: u64,
    #[prost(uint64, required, tag = "2")]
    pub log_id: u64,
    /// The `service_id` from the websocket URL.
    #[prost(int32, required, tag = "3")]
    pub service: i32,
    /// [`METHOD_CONTROL`] or [`METHOD_DATA`].
    #[prost(int32, required, tag = "4")]
    pub method: i32,
    #[prost(message, repeated, tag = "5")]
    pub headers: Vec<Header>,
    #[prost(string, optional, tag = "6")]
    pub payload_encoding: Option<String>,
    #[prost(string, optional, tag = "7")]
    pub payload_type: Option<String>,
    #[prost(bytes = "vec", optional, tag = "8")]
    pub payload: Option<Vec<u8>>,
    #[prost(string, optional, tag = "9")]
    pub log_id_new: Option<String>,
}

/// A frame that could not be decoded.
#[derive(Debug, thiserror::Error)]
#[error("undecodable pbbp2 frame ({len} bytes): {source}")]
pub struct FrameError {
    len: usize,
    #[source]
    source: prost::DecodeError,
}

impl Frame {
    /// Decode one binary websocket message.
    pub fn decode_bytes(bytes: &[u8]) -> Result<Frame, FrameError> {
        Frame::decode(bytes).map_err(|source| FrameError {
            len: bytes.len(),
            source,
        })
    }

    /// Encode to the bytes of one binary websocket message.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.encode_to_vec()
    }

    /// The value of the first header named `key`.
    pub fn header(&self, key: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|h| h.key == key)
            .map(|h| h.value.as_str())
    }

    /// The `type` header (`event`, `card`, `ping`, `pong`), or `""`.
    pub fn frame_type(&self) -> &str {
        self.header(HEADER_TYPE).unwrap_or("")
    }

    /// The payload bytes (empty when absent).
    pub fn payload_bytes(&self) -> &[u8] {
        self.payload.as_deref().unwrap_or(&[])
    }

    /// The ping the client sends every `PingInterval`: SeqID 0, LogID 0, `service`, method 0,
    /// one header `type: ping` (SDKs: `NewPingFrame`).
    pub fn ping(service: i32) -> Frame {
        Frame {
            seq_id: 0,
            log_id: 0,
            service,
            method: METHOD_CONTROL,
            headers: vec![header(HEADER_TYPE, "ping")],
            payload_encoding: None,
            payload_type: None,
            payload: None,
            log_id_new: None,
        }
    }

    /// The ACK of a data frame: the same frame (SeqID, LogID, service, method and every header)
    /// with a `biz_rt` header (handler time in ms) appended and `payload` replaced by the JSON
    /// response ([`ack_payload`]).
    pub fn ack(&self, biz_rt_ms: u64, payload: Vec<u8>) -> Frame {
        let mut headers = self.headers.clone();
        headers.push(header(HEADER_BIZ_RT, &biz_rt_ms.to_string()));
        Frame {
            seq_id: self.seq_id,
            log_id: self.log_id,
            service: self.service,
            method: self.method,
            headers,
            payload_encoding: self.payload_encoding.clone(),
            payload_type: self.payload_type.clone(),
            payload: Some(payload),
            log_id_new: self.log_id_new.clone(),
        }
    }
}

/// Build a [`Header`].
pub fn header(key: &str, value: &str) -> Header {
    Header {
        key: key.to_string(),
        value: value.to_string(),
    }
}

/// The JSON payload of an ACK (`Response` in the SDKs).
///
/// Without callback data it is Go's form, `{"code":200,"headers":null,"data":null}`; with data
/// (a card callback's answer) it is `{"code":200,"data":"<base64(JSON)>"}` as the Python and Node
/// SDKs send it. `code` is 200 for success, 500 for a handler error.
pub fn ack_payload(code: u16, data: Option<&[u8]>) -> Vec<u8> {
    use base64::Engine as _;
    #[derive(Serialize)]
    struct Plain {
        code: u16,
        headers: Option<()>,
        data: Option<()>,
    }
    #[derive(Serialize)]
    struct WithData {
        code: u16,
        data: String,
    }
    let out = match data {
        None => serde_json::to_vec(&Plain {
            code,
            headers: None,
            data: None,
        }),
        Some(d) => serde_json::to_vec(&WithData {
            code,
            data: base64::engine::general_purpose::STANDARD.encode(d),
        }),
    };
    // Serialising these two plain structs cannot fail; keep a valid answer regardless.
    out.unwrap_or_else(|_| format!("{{\"code\":{code}}}").into_bytes())
}

/// An ACK payload read back (the inverse of [`ack_payload`], for fakes and tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckPayload {
    pub code: i64,
    /// The base64-decoded `data`, when present and not null.
    pub data: Option<Vec<u8>>,
}

/// Read an ACK payload; `None` when it is not the JSON object described at [`ack_payload`].
pub fn parse_ack_payload(payload: &[u8]) -> Option<AckPayload> {
    use base64::Engine as _;
    let v: serde_json::Value = serde_json::from_slice(payload).ok()?;
    let code = v.get("code")?.as_i64()?;
    let data = match v.get("data") {
        None | Some(serde_json::Value::Null) => None,
        Some(d) => Some(
            base64::engine::general_purpose::STANDARD
                .decode(d.as_str()?)
                .ok()?,
        ),
    };
    Some(AckPayload { code, data })
}

pub use ethan_lark_api::api::ClientConfig;

#[cfg(test)]
mod tests {
    use super::*;

    fn vector(name: &str) -> Vec<u8> {
        let path = format!(
            "{}/../tests/fixtures/lark/ws_frames/{name}.bin",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    const SERVICE: i32 = 33554678;

    #[test]
    fn ping_is_byte_exact() {
        let ping = Frame::ping(SERVICE);
        assert_eq!(ping.to_bytes(), vector("ping"));
        assert_eq!(
            hex::encode(ping.to_bytes()),
            "0800100018f681801020002a0c0a0474797065120470696e67"
        );
        let back = Frame::decode_bytes(&vector("ping")).unwrap();
        assert_eq!(back, ping);
    }

    #[test]
    fn pong_carries_client_config() {
        let f = Frame::decode_bytes(&vector("pong")).unwrap();
        assert_eq!(f.method, METHOD_CONTROL);
        assert_eq!(f.service, SERVICE);
        assert_eq!(f.frame_type(), "pong");
        let cfg: ClientConfig = serde_json::from_slice(f.payload_bytes()).unwrap();
        assert_eq!(cfg, ClientConfig::default());
        assert_eq!(f.to_bytes(), vector("pong"));
    }

    #[test]
    fn data_event_decodes() {
        let f = Frame::decode_bytes(&vector("data_event")).unwrap();
        assert_eq!(f.seq_id, 7318342810);
        assert_eq!(f.log_id, 7318342811);
        assert_eq!(f.method, METHOD_DATA);
        assert_eq!(f.frame_type(), "event");
        assert_eq!(f.header(HEADER_MESSAGE_ID), Some("4f2a0c7e-msg-0001"));
        assert_eq!(f.header(HEADER_SUM), Some("1"));
        assert_eq!(f.header(HEADER_SEQ), Some("0"));
        assert_eq!(f.header(HEADER_TRACE_ID), Some("b1c2d3e4f5a6"));
        let v: serde_json::Value = serde_json::from_slice(f.payload_bytes()).unwrap();
        assert_eq!(v["header"]["event_type"], "im.message.receive_v1");
        assert_eq!(f.to_bytes(), vector("data_event"));
    }

    #[test]
    fn fragments_concatenate_to_the_event() {
        let a = Frame::decode_bytes(&vector("data_event_frag0")).unwrap();
        let b = Frame::decode_bytes(&vector("data_event_frag1")).unwrap();
        assert_eq!(a.header(HEADER_SUM), Some("2"));
        assert_eq!(b.header(HEADER_SEQ), Some("1"));
        assert_eq!(a.header(HEADER_MESSAGE_ID), b.header(HEADER_MESSAGE_ID));
        let mut all = a.payload_bytes().to_vec();
        all.extend_from_slice(b.payload_bytes());
        let whole = Frame::decode_bytes(&vector("data_event")).unwrap();
        assert_eq!(all, whole.payload_bytes());
    }

    #[test]
    fn event_ack_is_byte_exact() {
        let data = Frame::decode_bytes(&vector("data_event")).unwrap();
        let ack = data.ack(12, ack_payload(200, None));
        assert_eq!(ack.to_bytes(), vector("ack_event"));
    }

    #[test]
    fn card_callback_ack_is_byte_exact() {
        #[derive(Serialize)]
        struct Toast {
            r#type: &'static str,
            content: &'static str,
        }
        #[derive(Serialize)]
        struct Resp {
            toast: Toast,
        }
        let incoming = Frame {
            seq_id: 9000000001,
            log_id: 9000000002,
            service: SERVICE,
            method: METHOD_DATA,
            headers: vec![
                header("type", "event"),
                header("message_id", "cb-msg-1"),
                header("sum", "1"),
                header("seq", "0"),
                header("trace_id", "t-cb"),
            ],
            payload_encoding: None,
            payload_type: None,
            payload: Some(b"{}".to_vec()),
            log_id_new: None,
        };
        let resp = serde_json::to_vec(&Resp {
            toast: Toast {
                r#type: "success",
                content: "Approved",
            },
        })
        .unwrap();
        let ack = incoming.ack(5, ack_payload(200, Some(&resp)));
        assert_eq!(ack.to_bytes(), vector("ack_card_callback"));
        let decoded = Frame::decode_bytes(&vector("ack_card_callback")).unwrap();
        assert_eq!(decoded.header(HEADER_BIZ_RT), Some("5"));
        let back = parse_ack_payload(decoded.payload_bytes()).unwrap();
        assert_eq!(back.code, 200);
        assert_eq!(back.data.as_deref(), Some(&resp[..]));
        let plain = parse_ack_payload(&ack_payload(500, None)).unwrap();
        assert_eq!(
            plain,
            AckPayload {
                code: 500,
                data: None
            }
        );
        assert!(parse_ack_payload(b"nope").is_none());
    }

    #[test]
    fn required_zero_fields_are_encoded() {
        let f = Frame {
            seq_id: 0,
            log_id: 0,
            service: 0,
            method: 0,
            headers: vec![],
            payload_encoding: None,
            payload_type: None,
            payload: None,
            log_id_new: None,
        };
        assert_eq!(f.to_bytes(), vec![0x08, 0, 0x10, 0, 0x18, 0, 0x20, 0]);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for bytes in [
            &b"\xff\xff\xff"[..],
            b"\x2a\x05\x0a",
            b"hello world",
            b"\x08",
        ] {
            assert!(Frame::decode_bytes(bytes).is_err(), "{bytes:?}");
        }
        // An empty message decodes to zeros (proto2 required fields are not checked by prost).
        assert!(Frame::decode_bytes(b"").is_ok());
    }

    #[test]
    fn client_config_tolerates_missing_keys() {
        let c: ClientConfig = serde_json::from_str(r#"{"PingInterval":5}"#).unwrap();
        assert_eq!(c.ping_interval, 5);
        assert_eq!(c.reconnect_nonce, 30);
    }
}
