//! Output counting readers (R5.1).
