//! `fs` family — to be filled in.

use crate::Family;

pub static FAMILY: Family = Family {
    name: "fs",
    title: "fs",
    help: "fs",
    workloads: &[],
};
