//! An A2A call's error, one type for both bindings: what went wrong ([`ErrorKind`], the A2A
//! error it is) and what to do about it. The JSON-RPC binding answers it as an error code, the
//! HTTP+JSON binding as an HTTP status with a `google.rpc.Status` body whose `ErrorInfo`
//! reason the SDK clients map back to the same error.

use axum::http::StatusCode;
use serde_json::{Value, json};

/// Which A2A error a call ends in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ErrorKind {
    /// The body is not JSON.
    Parse,
    /// A parameter is missing or not one this agent takes.
    InvalidParams,
    /// No such JSON-RPC method.
    MethodNotFound,
    TaskNotFound,
    TaskNotCancelable,
    /// The operation does not apply to the task as it stands.
    UnsupportedOperation,
    /// A part this agent cannot take (not base64, too large, of no known kind).
    ContentTypeNotSupported,
    /// The request asked for a protocol version this agent does not speak (`version.rs`).
    VersionNotSupported,
    Internal,
}

/// An A2A call's error: its kind and what to do about it.
#[derive(Debug)]
pub(super) struct A2aError {
    pub(super) kind: ErrorKind,
    pub(super) message: String,
}

impl A2aError {
    pub(super) fn new(kind: ErrorKind, message: impl Into<String>) -> A2aError {
        A2aError {
            kind,
            message: message.into(),
        }
    }

    pub(super) fn invalid(message: impl Into<String>) -> A2aError {
        A2aError::new(ErrorKind::InvalidParams, message)
    }

    pub(super) fn task_not_found(id: &str) -> A2aError {
        A2aError::new(
            ErrorKind::TaskNotFound,
            format!("no task `{id}` of this agent (ListTasks shows them)"),
        )
    }

    pub(super) fn internal(err: impl std::fmt::Display) -> A2aError {
        A2aError::new(ErrorKind::Internal, err.to_string())
    }

    /// The JSON-RPC `error` object.
    pub(super) fn rpc(&self) -> Value {
        let code = match self.kind {
            ErrorKind::Parse => -32700,
            ErrorKind::InvalidParams => -32602,
            ErrorKind::MethodNotFound => -32601,
            ErrorKind::TaskNotFound => -32001,
            ErrorKind::TaskNotCancelable => -32002,
            ErrorKind::UnsupportedOperation => -32004,
            ErrorKind::ContentTypeNotSupported => -32005,
            ErrorKind::VersionNotSupported => -32009,
            ErrorKind::Internal => -32603,
        };
        json!({"code": code, "message": self.message})
    }

    /// The HTTP status and `google.rpc.Status` body of the HTTP+JSON binding.
    pub(super) fn http(&self) -> (StatusCode, Value) {
        let (status, grpc, reason) = match self.kind {
            ErrorKind::Parse => (
                StatusCode::BAD_REQUEST,
                "INVALID_ARGUMENT",
                "INVALID_REQUEST",
            ),
            ErrorKind::InvalidParams => (
                StatusCode::BAD_REQUEST,
                "INVALID_ARGUMENT",
                "INVALID_PARAMS",
            ),
            ErrorKind::MethodNotFound => (StatusCode::NOT_FOUND, "NOT_FOUND", "METHOD_NOT_FOUND"),
            ErrorKind::TaskNotFound => (StatusCode::NOT_FOUND, "NOT_FOUND", "TASK_NOT_FOUND"),
            ErrorKind::TaskNotCancelable => (
                StatusCode::BAD_REQUEST,
                "FAILED_PRECONDITION",
                "TASK_NOT_CANCELABLE",
            ),
            ErrorKind::UnsupportedOperation => (
                StatusCode::BAD_REQUEST,
                "FAILED_PRECONDITION",
                "UNSUPPORTED_OPERATION",
            ),
            ErrorKind::ContentTypeNotSupported => (
                StatusCode::BAD_REQUEST,
                "INVALID_ARGUMENT",
                "CONTENT_TYPE_NOT_SUPPORTED",
            ),
            ErrorKind::VersionNotSupported => (
                StatusCode::BAD_REQUEST,
                "FAILED_PRECONDITION",
                "VERSION_NOT_SUPPORTED",
            ),
            ErrorKind::Internal => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "INTERNAL",
                "INTERNAL_ERROR",
            ),
        };
        let details = json!([{
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": reason,
            "domain": "a2a-protocol.org",
            "metadata": {},
        }]);
        (status, status_body(status, grpc, &self.message, details))
    }
}

/// A `google.rpc.Status` body, as the HTTP+JSON binding frames every error; `details` holds
/// the `ErrorInfo` naming an A2A error, or nothing for an error of HTTP alone (no such agent).
pub(super) fn status_body(status: StatusCode, grpc: &str, message: &str, details: Value) -> Value {
    json!({"error": {
        "code": status.as_u16(),
        "status": grpc,
        "message": message,
        "details": details,
    }})
}
