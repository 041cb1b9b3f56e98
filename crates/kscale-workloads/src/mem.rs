//! `mem` family — to be filled in.

use crate::Family;

pub static FAMILY: Family = Family {
    name: "mem",
    title: "mem",
    help: "mem",
    workloads: &[],
};
