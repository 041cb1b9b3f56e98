//! `ipc` family — to be filled in.

use crate::Family;

pub static FAMILY: Family = Family {
    name: "ipc",
    title: "ipc",
    help: "ipc",
    workloads: &[],
};
