//! File-growth polling (R5.7).
