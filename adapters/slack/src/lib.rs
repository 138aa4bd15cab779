//! baton's slack adapter (in progress).
