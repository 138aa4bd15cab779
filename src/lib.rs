//! baton
