//! The Feishu/Lark adapter end to end (in progress).
