//! The sd_notify heartbeat socket (R5.4).
