//! One task reference for every sink (R10.6): a task by name or by id.

use std::fmt;
use std::sync::Arc;

use watchdog_core::TaskId;

/// Names a task, by its name or by its id: the one task reference every sink
/// takes (R10.6), so `token_for`, `watch`, `settle`, `observations` and
/// `subscribe_task` accept a name (`&str`, `String`, `Arc<str>`) or a
/// [`TaskId`] alike.
///
/// By name it means the live task of that name, or else the next one to
/// start with it (names are unique among live tasks, SPEC §1); by id, that one
/// task, which ids never confuse with a later task reusing the name.
///
/// # Examples
///
/// ```
/// use stallwarden_sinks::TaskRef;
/// use watchdog_core::TaskId;
/// assert_eq!(TaskRef::from("build"), TaskRef::Name("build".into()));
/// assert_eq!(TaskRef::from(TaskId::from_raw(3)), TaskRef::Id(TaskId::from_raw(3)));
/// assert_eq!(TaskRef::from("build").to_string(), "\"build\"");
/// assert_eq!(TaskRef::from(TaskId::from_raw(3)).to_string(), "#3");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TaskRef {
    /// The live task with this name, or the next one to start.
    Name(Arc<str>),
    /// The task with this id.
    Id(TaskId),
}

impl From<&str> for TaskRef {
    fn from(name: &str) -> Self {
        TaskRef::Name(name.into())
    }
}

impl From<&String> for TaskRef {
    fn from(name: &String) -> Self {
        TaskRef::Name(name.as_str().into())
    }
}

impl From<String> for TaskRef {
    fn from(name: String) -> Self {
        TaskRef::Name(name.into())
    }
}

impl From<Arc<str>> for TaskRef {
    fn from(name: Arc<str>) -> Self {
        TaskRef::Name(name)
    }
}

impl From<TaskId> for TaskRef {
    fn from(id: TaskId) -> Self {
        TaskRef::Id(id)
    }
}

/// A name quoted, an id as `#N`: `"build"`, `#3`.
impl fmt::Display for TaskRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskRef::Name(name) => write!(f, "{name:?}"),
            TaskRef::Id(id) => write!(f, "{id}"),
        }
    }
}
