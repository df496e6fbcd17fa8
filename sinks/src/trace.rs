//! A sink that writes events as structured tracing records (R6.4).
