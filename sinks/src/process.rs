//! A sink that signals and reaps the watched process group (R6.4).
