//! Background-task records (R5.6).
