//! A sink that calls a closure (R6.4).
