//! A sink that cancels one tokio-util cancellation token per task (R6.4).
