//! A sink that streams events to subscribers (R6.4).
