//! Tool-call start/finish feeds (R5.3).
