//! The server's rooms: members join until a room is full, then its member
//! list is fixed and read without a lock. Both server designs use it.

use anyhow::{bail, Result};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// A room on the server: members join until it holds `users`; from then on
/// its member list is fixed and read without a lock.
pub(super) struct Room<M> {
    pub(super) id: u32,
    pub(super) joining: Mutex<Vec<Arc<M>>>,
    pub(super) full: OnceLock<Members<M>>,
}

/// A room's fixed member list, once full.
pub(super) type Members<M> = Arc<[Arc<M>]>;
/// What a join gives back: the room, and its members if the join filled it.
pub(super) type Joined<M> = (Arc<Room<M>>, Option<Members<M>>);

/// Every room of the server, by id. A user names its room in its first
/// frame; rooms are created on first use.
pub(super) struct Rooms<M> {
    pub(super) users: usize,
    pub(super) map: Mutex<HashMap<u32, Arc<Room<M>>>>,
}

impl<M> Rooms<M> {
    pub(super) fn new(users: usize) -> Self {
        Rooms {
            users,
            map: Mutex::new(HashMap::new()),
        }
    }

    /// Adds `m` to room `id`; returns the room, and its members when this
    /// join filled it (the caller welcomes them all).
    pub(super) fn join(&self, id: u32, m: Arc<M>) -> Result<Joined<M>> {
        let room = {
            let mut map = self
                .map
                .lock()
                .map_err(|_| anyhow::anyhow!("rooms poisoned"))?;
            map.entry(id)
                .or_insert_with(|| {
                    Arc::new(Room {
                        id,
                        joining: Mutex::new(Vec::with_capacity(self.users)),
                        full: OnceLock::new(),
                    })
                })
                .clone()
        };
        let mut j = room
            .joining
            .lock()
            .map_err(|_| anyhow::anyhow!("room poisoned"))?;
        if j.len() >= self.users {
            bail!("room {id} already has its {} users", self.users);
        }
        j.push(m);
        if j.len() < self.users {
            return Ok((room.clone(), None));
        }
        let all: Members<M> = j.iter().cloned().collect();
        let _ = room.full.set(all.clone());
        drop(j);
        Ok((room, Some(all)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_room_fills_then_refuses() {
        let rooms = Rooms::<u32>::new(3);
        assert!(rooms.join(5, Arc::new(0)).unwrap().1.is_none());
        assert!(rooms.join(6, Arc::new(0)).unwrap().1.is_none());
        assert!(rooms.join(5, Arc::new(1)).unwrap().1.is_none());
        let (room, full) = rooms.join(5, Arc::new(2)).unwrap();
        let full = full.expect("the third join fills the room");
        assert_eq!(full.iter().map(|m| **m).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(room.full.get().map(|f| f.len()), Some(3));
        let e = rooms.join(5, Arc::new(3)).err().unwrap().to_string();
        assert!(e.contains("room 5 already has its 3 users"), "{e}");
    }
}
