//! baton's feishu adapter (in progress).
