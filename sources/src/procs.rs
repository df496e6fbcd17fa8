//! Process-table sampling of a task's descendants (R5.5).
