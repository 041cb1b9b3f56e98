//! `ctx` family — to be filled in.

use crate::Family;

pub static FAMILY: Family = Family {
    name: "ctx",
    title: "ctx",
    help: "ctx",
    workloads: &[],
};
