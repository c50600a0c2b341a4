//! Operations that arrive together, written together: one transaction (and one WAL flush) for
//! a batch instead of one per operation (docs/performance.md, "Service on PostgreSQL and replicas").
//!
//! A task per kind of operation, on a thread of its own (`Batcher::start`), gathers them from
//! a channel. It takes the first that comes,
//! waits for the operation under way (a batch, or one that came alone) to be written, then
//! takes whatever else is waiting (up to `MOST`), and, when fewer are waiting than the last
//! batch's size leads it to expect, waits up to `LINGER` for them (`take`): batches form
//! while earlier ones are being written and from the bursts of senders a batch answered, so
//! under light load an operation comes alone and is answered `Alone`, and its caller runs it
//! on its own (turn_batch.rs: a batch of one through the same functions, run
//! again when it may not decide, which a batch does not do). The wait for the one under way
//! is at most `STUCK`: a transaction waiting for a lock some other client holds (a session
//! locked by an operator's open transaction) holds up no one else for longer. A batch's
//! transaction either commits whole or keeps nothing: when it fails (a lock it could not take,
//! a limit it must not decide alone), all its operations are answered `Alone` and run one at a
//! time, where every rule is applied as for any single operation.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use deadpool_postgres::{Object, Pool};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::error::StoreError;

/// The most operations in one batch.
const MOST: usize = 32;
/// How long the operation under way holds up the next batch at most. One batch at a time:
/// while it is written, the operations that arrive wait and form the next (measured with
/// `scripts/perf/service-pg-throughput.sh`, one node, 32 connections: 3,800 POSTs/s with one
/// at a time, 3,500 with two, 3,000 with four, 2,100 unbatched; docs/perf-log.md). A batch
/// takes a few ms; one that takes longer is waiting for something, and the next goes ahead.
const STUCK: Duration = Duration::from_millis(50);

/// How long a batch waits at most for the operations it expects (`expected`). (Tokio's timer
/// counts whole milliseconds.)
const LINGER: Duration = Duration::from_millis(1);

/// How many operations the next batch waits for (up to `LINGER`) after one of `last`: three
/// in four of them. Under load, operations come in bursts: the senders a batch answered send
/// again together, and the first of a burst, finding nothing under way, would be written alone
/// while the others waited for it, a transaction of its own before each batch (4 % of the
/// turns on one node, 10 % on two replicas; docs/perf-log.md, "the first of a burst"). Under
/// light load (`last` of one or two) nothing waits.
fn expected(last: usize) -> usize {
    last * 3 / 4
}

/// The operations of the next batch: `first`, those waiting behind it (up to `MOST`), and,
/// while fewer than `want`, those that come within `LINGER`.
async fn take<T>(first: T, rx: &mut mpsc::UnboundedReceiver<T>, want: usize) -> Vec<T> {
    let mut jobs = vec![first];
    let linger = tokio::time::sleep(LINGER);
    tokio::pin!(linger);
    while jobs.len() < MOST {
        match rx.try_recv() {
            Ok(job) => jobs.push(job),
            Err(_) if jobs.len() < want => tokio::select! {
                biased;
                job = rx.recv() => match job {
                    Some(job) => jobs.push(job),
                    None => break,
                },
                _ = &mut linger => break,
            },
            Err(_) => break,
        }
    }
    jobs
}

/// One kind of operation written in batches.
pub(super) trait Batch: Send + Sync + 'static {
    type In: Send + 'static;
    type Out: Send + 'static;

    /// Writes `inputs` in one transaction on `client`: each one's outcome, in their order, or
    /// `None` for one the batch left alone (written by nothing; its caller runs it). An error
    /// means nothing was kept.
    fn write(
        &self,
        client: Object,
        inputs: &[Self::In],
    ) -> impl Future<Output = Result<Vec<Option<Self::Out>>, StoreError>> + Send;

    /// What is done with an outcome whose caller stopped waiting for it.
    fn unanswered(&self, _input: Self::In, _out: Self::Out) {}
}

/// What a caller gets back.
pub(super) enum Batched<I, O> {
    /// Its outcome.
    Done(O),
    /// Its input, untouched in the database: run it on its own. An operation that came alone
    /// is the one under way (`Slot`) until it is written (or gives its place up), so that
    /// operations arriving meanwhile wait and form the next batch; those of a failed batch
    /// are not.
    Alone(I, Option<Slot>),
}

/// The place of the operation under way: the next batch waits until it is dropped (or for
/// `STUCK`). The time it is held is the writer's busy time (`BatchUse::busy`).
pub(super) struct Slot {
    /// Dropped with the slot, which the receiver sees as the operation written.
    _written: oneshot::Sender<()>,
    since: Instant,
    counts: Arc<Counts>,
}

impl Slot {
    fn new(counts: &Arc<Counts>) -> (Slot, oneshot::Receiver<()>) {
        let (written, rx) = oneshot::channel();
        let slot = Slot {
            _written: written,
            since: Instant::now(),
            counts: Arc::clone(counts),
        };
        (slot, rx)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let held = u64::try_from(self.since.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.counts.busy_micros.fetch_add(held, Relaxed);
    }
}

struct Job<B: Batch> {
    input: B::In,
    answer: oneshot::Sender<Batched<B::In, B::Out>>,
}

/// How one kind of operation was written since the replica started (`/metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BatchUse {
    /// Batches committed, and the operations they wrote.
    pub batches: u64,
    pub batched: u64,
    /// Batches that kept nothing (their operations ran alone).
    pub failed: u64,
    /// Operations answered `Alone`: they came alone, their batch failed, or it left them.
    pub alone: u64,
    /// How long an operation was under way (a batch, or one that came alone, from its taking
    /// to its end): one at a time, so its rate is the share of time this kind's writer was
    /// busy (near 1: its batches run back to back).
    pub busy: Duration,
}

#[derive(Debug, Default)]
struct Counts {
    batches: AtomicU64,
    batched: AtomicU64,
    failed: AtomicU64,
    alone: AtomicU64,
    busy_micros: AtomicU64,
}

/// The sending end: cheap to clone. The gathering task ends when every clone is dropped.
pub(super) struct Batcher<B: Batch> {
    jobs: mpsc::UnboundedSender<Job<B>>,
    counts: Arc<Counts>,
}

impl<B: Batch> Clone for Batcher<B> {
    fn clone(&self) -> Self {
        Batcher {
            jobs: self.jobs.clone(),
            counts: Arc::clone(&self.counts),
        }
    }
}

impl<B: Batch> Batcher<B> {
    /// Starts the gathering task of `batch`, on connections of `pool`, on a thread of its own
    /// (`convo-{name}`) with a runtime of its own, where the batches' writes and their
    /// connections' tasks run too: woken by the database's answers, they do not wait behind
    /// the service's HTTP tasks on its runtime, and a batch ends sooner. Measured against the
    /// service's runtime (`scripts/perf/service-pg-throughput.sh`, six pairs): one node 0-7 %
    /// more POSTs/s, two replicas with 1,000 keys -1 to +11 %, and PostgreSQL's CPU per POST
    /// with two replicas 2-9 % lower in every pair (docs/perf-log.md, 6 Dec 2026, 17:15 UTC).
    pub(super) fn start(pool: Pool, batch: B, name: &str) -> Result<Batcher<B>, StoreError> {
        let (jobs, rx) = mpsc::unbounded_channel();
        let counts = Arc::new(Counts::default());
        let task = gather(Arc::new(batch), pool, rx, Arc::clone(&counts));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| StoreError::Join(format!("a batch writer's runtime: {e}")))?;
        std::thread::Builder::new()
            .name(format!("convo-{name}"))
            .spawn(move || runtime.block_on(task))
            .map_err(|e| StoreError::Join(format!("a batch writer's thread: {e}")))?;
        Ok(Batcher { jobs, counts })
    }

    /// How its operations were written so far.
    pub(super) fn used(&self) -> BatchUse {
        let c = &self.counts;
        BatchUse {
            batches: c.batches.load(Relaxed),
            batched: c.batched.load(Relaxed),
            failed: c.failed.load(Relaxed),
            alone: c.alone.load(Relaxed),
            busy: Duration::from_micros(c.busy_micros.load(Relaxed)),
        }
    }

    /// `input`'s outcome, or `input` back when it is to run on its own.
    pub(super) async fn submit(&self, input: B::In) -> Result<Batched<B::In, B::Out>, StoreError> {
        let (answer, answered) = oneshot::channel();
        if let Err(mpsc::error::SendError(job)) = self.jobs.send(Job { input, answer }) {
            return Ok(Batched::Alone(job.input, None));
        }
        answered
            .await
            .map_err(|_| StoreError::Join("the batch writer stopped".into()))
    }
}

async fn gather<B: Batch>(
    batch: Arc<B>,
    pool: Pool,
    mut rx: mpsc::UnboundedReceiver<Job<B>>,
    counts: Arc<Counts>,
) {
    let mut under_way: Option<oneshot::Receiver<()>> = None;
    let mut last = 1;
    // The batches being written: the runtime ends with this task, so it waits for them.
    let mut writing = tokio::task::JoinSet::new();
    while let Some(first) = rx.recv().await {
        while writing.try_join_next().is_some() {}
        if let Some(written) = under_way.take() {
            // Dropped (an error) when it is written; a timeout: it is stuck.
            let _ = tokio::time::timeout(STUCK, written).await;
        }
        let mut jobs = take(first, &mut rx, expected(last)).await;
        let (slot, written) = Slot::new(&counts);
        under_way = Some(written);
        last = jobs.len();
        if jobs.len() == 1 {
            counts.alone.fetch_add(1, Relaxed);
            let job = jobs.remove(0);
            let _ = job.answer.send(Batched::Alone(job.input, Some(slot)));
            continue;
        }
        let (batch, pool, counts) = (Arc::clone(&batch), pool.clone(), Arc::clone(&counts));
        writing.spawn(async move {
            let (inputs, answers): (Vec<_>, Vec<_>) =
                jobs.into_iter().map(|j| (j.input, j.answer)).unzip();
            let written = match pool.get().await {
                Ok(client) => batch.write(client, &inputs).await,
                Err(e) => Err(e.into()),
            };
            drop(slot);
            let written = written.and_then(|outs| {
                if outs.len() == inputs.len() {
                    Ok(outs)
                } else {
                    Err(StoreError::Corrupt(format!(
                        "a batch of {} answered {}",
                        inputs.len(),
                        outs.len()
                    )))
                }
            });
            match written {
                Ok(outs) => {
                    counts.batches.fetch_add(1, Relaxed);
                    for ((input, answer), out) in inputs.into_iter().zip(answers).zip(outs) {
                        let Some(out) = out else {
                            alone::<B>(&counts, vec![Job { input, answer }]);
                            continue;
                        };
                        counts.batched.fetch_add(1, Relaxed);
                        if let Err(Batched::Done(out)) = answer.send(Batched::Done(out)) {
                            batch.unanswered(input, out);
                        }
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, size = inputs.len(),
                        "a batch was not written; its operations run one at a time");
                    counts.failed.fetch_add(1, Relaxed);
                    alone::<B>(
                        &counts,
                        inputs
                            .into_iter()
                            .zip(answers)
                            .map(|(input, answer)| Job { input, answer })
                            .collect(),
                    );
                }
            }
        });
    }
    while writing.join_next().await.is_some() {}
}

fn alone<B: Batch>(counts: &Counts, jobs: Vec<Job<B>>) {
    counts.alone.fetch_add(jobs.len() as u64, Relaxed);
    for job in jobs {
        let _ = job.answer.send(Batched::Alone(job.input, None));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::oneshot::error::TryRecvError;

    /// `take` of the operations sent so far on a new channel, `want` expected.
    async fn take_of(sent: &[u32], want: usize) -> (Vec<u32>, mpsc::UnboundedSender<u32>) {
        let (tx, mut rx) = mpsc::unbounded_channel();
        for &n in &sent[1..] {
            tx.send(n).unwrap();
        }
        (take(sent[0], &mut rx, want).await, tx)
    }

    #[tokio::test(start_paused = true)]
    async fn under_light_load_nothing_waits() {
        let start = Instant::now();
        assert_eq!(take_of(&[1], expected(1)).await.0, [1]);
        assert_eq!(take_of(&[1], expected(2)).await.0, [1]);
        assert_eq!(take_of(&[1, 2, 3], expected(1)).await.0, [1, 2, 3]);
        assert_eq!(Instant::now(), start, "nothing waited for the timer");
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_of_a_burst_waits_for_the_rest_of_it() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let start = Instant::now();
        // The others come a moment after the first (while `take` waits for them).
        let others = tokio::spawn(async move {
            for n in 2..=8 {
                tokio::task::yield_now().await;
                tx.send(n).unwrap();
            }
            tx
        });
        let jobs = take(1, &mut rx, expected(8)).await;
        assert_eq!(jobs, (1..=jobs.len() as u32).collect::<Vec<_>>());
        assert!(jobs.len() >= expected(8), "{jobs:?}");
        assert_eq!(Instant::now(), start, "the burst came before the timer");
        let _tx = others.await.unwrap();
        let rest: Vec<u32> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        assert_eq!(jobs.len() + rest.len(), 8, "every operation once");
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_smaller_than_expected_waits_no_longer_than_linger() {
        let start = Instant::now();
        let (jobs, _tx) = take_of(&[1, 2], expected(16)).await;
        assert_eq!(jobs, [1, 2]);
        let waited = Instant::now() - start;
        assert!(waited >= LINGER && waited < LINGER * 3, "waited {waited:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_closed_channel_ends_the_wait() {
        let start = Instant::now();
        let (tx, mut rx) = mpsc::unbounded_channel::<u32>();
        drop(tx);
        assert_eq!(take(1, &mut rx, expected(16)).await, [1]);
        assert_eq!(Instant::now(), start);
    }

    #[tokio::test(start_paused = true)]
    async fn the_time_a_slot_is_held_is_the_busy_time() {
        let counts = Arc::new(Counts::default());
        let (slot, mut written) = Slot::new(&counts);
        tokio::time::advance(Duration::from_millis(7)).await;
        assert_eq!(
            written.try_recv(),
            Err(TryRecvError::Empty),
            "under way while held"
        );
        drop(slot);
        assert_eq!(
            written.try_recv(),
            Err(TryRecvError::Closed),
            "written once dropped"
        );
        let (slot, _written) = Slot::new(&counts);
        tokio::time::advance(Duration::from_millis(3)).await;
        drop(slot);
        assert_eq!(counts.busy_micros.load(Relaxed), 10_000);
    }

    #[tokio::test(start_paused = true)]
    async fn a_batch_takes_at_most_most() {
        let sent: Vec<u32> = (0..MOST as u32 + 5).collect();
        let (jobs, _tx) = take_of(&sent, expected(MOST)).await;
        assert_eq!(jobs, sent[..MOST]);
    }
}
