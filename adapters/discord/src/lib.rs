//! baton's discord adapter (in progress).
