//! The calls in flight: each has a [`Cancel`] that a `notifications/cancelled` or the client's
//! disconnect trips, so a running sandbox is killed and the kernel leaves nothing half-applied.

use airlock_kernel::Cancel;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Registry of running calls.
#[derive(Default)]
pub struct Calls {
    next: AtomicU64,
    running: Mutex<HashMap<u64, Cancel>>,
    /// Once set, new calls start already cancelled (the client is gone).
    closed: Cancel,
}

/// A running call's membership in [`Calls`]; leaving scope removes it.
pub struct CallGuard {
    calls: Arc<Calls>,
    id: u64,
    cancel: Cancel,
}

impl CallGuard {
    /// The call's cancellation flag.
    pub fn cancel(&self) -> Cancel {
        self.cancel.clone()
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.calls.lock().remove(&self.id);
    }
}

impl Calls {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Cancel>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Register a new call.
    pub fn start(self: &Arc<Self>) -> CallGuard {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let cancel = Cancel::new();
        let mut running = self.lock();
        if self.closed.is_cancelled() {
            cancel.cancel();
        }
        running.insert(id, cancel.clone());
        CallGuard {
            calls: self.clone(),
            id,
            cancel,
        }
    }

    /// The client is gone: cancel every running call and every later one.
    pub fn cancel_all(&self) {
        let running = self.lock();
        self.closed.cancel();
        for c in running.values() {
            c.cancel();
        }
    }

    /// How many calls are running.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when no call is running.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Wait (polling) until no call is running or `limit` passes; true when idle.
    pub fn wait_idle(&self, limit: Duration) -> bool {
        let start = Instant::now();
        while !self.is_empty() {
            if start.elapsed() >= limit {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancel_all_trips_running_and_later_calls() {
        let calls = Arc::new(Calls::default());
        let a = calls.start();
        let b = calls.start();
        assert_eq!(calls.len(), 2);
        calls.cancel_all();
        assert!(a.cancel().is_cancelled() && b.cancel().is_cancelled());
        let c = calls.start();
        assert!(
            c.cancel().is_cancelled(),
            "a call after disconnect starts cancelled"
        );
        drop((a, b, c));
        assert!(calls.wait_idle(Duration::from_millis(10)));
    }

    #[test]
    fn guards_leave_the_registry_and_calls_are_independent() {
        let calls = Arc::new(Calls::default());
        let a = calls.start();
        {
            let b = calls.start();
            b.cancel().cancel();
            assert!(!a.cancel().is_cancelled());
        }
        assert_eq!(calls.len(), 1);
        assert!(!calls.wait_idle(Duration::from_millis(30)));
        drop(a);
        assert!(calls.is_empty());
    }
}
