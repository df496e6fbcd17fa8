//! Streamed tool-argument deltas and their stream adapters (R5.2).
