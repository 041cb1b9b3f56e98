//! chat's wire format: a fixed header on every frame, and the checks a
//! receiver and the server make of what arrives.

use anyhow::{bail, Result};

/// Every frame starts with this header; the rest is filler up to `size`.
pub(super) const HEADER: usize = 24;
/// `seq` of the frame a user sends first to name its room and itself.
pub(super) const JOIN: u32 = u32::MAX;
/// `seq` of the frame the server sends every member once its room is full.
pub(super) const WELCOME: u32 = u32::MAX - 1;

/// A frame's header: little-endian `room`, `user`, `seq`, 4 reserved bytes,
/// and the sender's clock in ns (only the load reads it: sender and
/// receivers of a room live in one load process, so one clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Header {
    pub(super) room: u32,
    pub(super) user: u32,
    pub(super) seq: u32,
    pub(super) sent_ns: u64,
}

impl Header {
    pub(super) fn write(&self, buf: &mut [u8]) {
        buf[0..4].copy_from_slice(&self.room.to_le_bytes());
        buf[4..8].copy_from_slice(&self.user.to_le_bytes());
        buf[8..12].copy_from_slice(&self.seq.to_le_bytes());
        buf[12..16].fill(0);
        buf[16..24].copy_from_slice(&self.sent_ns.to_le_bytes());
    }
    pub(super) fn read(buf: &[u8]) -> Header {
        let u32_at = |i: usize| u32::from_le_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        let mut ns = [0u8; 8];
        ns.copy_from_slice(&buf[16..24]);
        Header {
            room: u32_at(0),
            user: u32_at(4),
            seq: u32_at(8),
            sent_ns: u64::from_le_bytes(ns),
        }
    }
    /// A whole frame of `size` bytes: this header and filler text.
    pub(super) fn frame(&self, size: usize) -> Vec<u8> {
        let mut f = vec![b'.'; size.max(HEADER)];
        self.write(&mut f);
        f
    }
}

/// A user's check of what it receives: from every other user of its room,
/// each message exactly once and in order (TCP and the server keep a
/// sender's order), so a lost or duplicated message is caught where it
/// happens, with the counts.
#[derive(Debug)]
pub(super) struct Tally {
    pub(super) room: u32,
    me: u32,
    pub(super) messages: u32,
    next: Vec<u32>,
    pub(super) got: u64,
}

impl Tally {
    pub(super) fn new(room: u32, me: u32, users: u32, messages: u32) -> Tally {
        Tally {
            room,
            me,
            messages,
            next: vec![0; users as usize],
            got: 0,
        }
    }
    pub(super) fn expected(&self) -> u64 {
        u64::from(self.messages) * (self.next.len() as u64 - 1)
    }
    pub(super) fn complete(&self) -> bool {
        self.got == self.expected()
    }
    pub(super) fn accept(&mut self, h: &Header) -> Result<()> {
        let whose = format!("user {} of room {}", self.me, self.room);
        if h.room != self.room {
            bail!("{whose} got a message of room {}", h.room);
        }
        if h.user == self.me {
            bail!("{whose} got its own message {} back", h.seq);
        }
        let expected = self.expected();
        let got = self.got;
        let Some(next) = self.next.get_mut(h.user as usize) else {
            bail!("{whose} got a message from unknown user {}", h.user);
        };
        if h.seq != *next || h.seq >= self.messages {
            let what = if h.seq < *next { "duplicated" } else { "lost" };
            bail!(
                "{whose}: message {what}: from user {} came message {} where {} was due \
                 ({} of {} received)",
                h.user,
                h.seq,
                *next,
                got,
                expected
            );
        }
        *next += 1;
        self.got += 1;
        Ok(())
    }
}

/// A message must come from the user the connection joined as.
pub(super) fn check_sender(h: &Header, room: u32, user: u32) -> Result<()> {
    if h.room != room || h.user != user || h.seq >= WELCOME {
        bail!(
            "user {user} of room {room} sent a frame as user {} of room {} (seq {})",
            h.user,
            h.room,
            h.seq
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(room: u32, user: u32, seq: u32) -> Header {
        Header {
            room,
            user,
            seq,
            sent_ns: 7,
        }
    }

    #[test]
    fn frames_round_trip() {
        let x = Header {
            room: 3,
            user: 19,
            seq: 99,
            sent_ns: 123_456_789_012,
        };
        let f = x.frame(100);
        assert_eq!(f.len(), 100);
        assert_eq!(Header::read(&f), x);
        assert!(f[HEADER..].iter().all(|b| *b == b'.'));
        assert_eq!(Header::read(&h(1, 2, JOIN).frame(24)).seq, JOIN);
    }

    #[test]
    fn a_tally_completes_at_messages_times_others() {
        let mut t = Tally::new(1, 0, 3, 2);
        assert_eq!(t.expected(), 4);
        for seq in 0..2 {
            for user in 1..3 {
                assert!(!t.complete());
                t.accept(&h(1, user, seq)).unwrap();
            }
        }
        assert!(t.complete());
    }

    #[test]
    fn a_tally_catches_duplicates_losses_and_strays() {
        let mut t = Tally::new(1, 0, 3, 5);
        t.accept(&h(1, 1, 0)).unwrap();
        let dup = t.accept(&h(1, 1, 0)).unwrap_err().to_string();
        assert!(
            dup.contains("duplicated") && dup.contains("(1 of 10 received)"),
            "{dup}"
        );
        let lost = t.accept(&h(1, 2, 1)).unwrap_err().to_string();
        assert!(
            lost.contains("lost") && lost.contains("message 1 where 0"),
            "{lost}"
        );
        assert!(t
            .accept(&h(1, 0, 0))
            .unwrap_err()
            .to_string()
            .contains("own"));
        assert!(t
            .accept(&h(2, 1, 1))
            .unwrap_err()
            .to_string()
            .contains("room 2"));
        assert!(t
            .accept(&h(1, 3, 0))
            .unwrap_err()
            .to_string()
            .contains("unknown"));
        // Past the last message is a duplicate of nothing: still refused.
        let mut t = Tally::new(1, 0, 2, 1);
        t.accept(&h(1, 1, 0)).unwrap();
        assert!(t.accept(&h(1, 1, 1)).is_err());
    }

    #[test]
    fn senders_must_be_who_they_joined_as() {
        assert!(check_sender(&h(1, 2, 0), 1, 2).is_ok());
        assert!(check_sender(&h(1, 3, 0), 1, 2).is_err());
        assert!(check_sender(&h(2, 2, 0), 1, 2).is_err());
        assert!(check_sender(&h(1, 2, JOIN), 1, 2).is_err());
    }
}
