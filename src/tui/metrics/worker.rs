//! Runs the metrics view's queries: the totals of the range and one query per bucket, at
//! most [`crate::series::CONCURRENCY`] at a time, each answer reported as soon as it arrives. A new load
//! replaces the one in flight; cancelling aborts the task, which drops its requests.

use futures_util::StreamExt;
use tokio::task::AbortHandle;

use super::{LoadPlan, MetricsEvent, MetricsRequest, Query};
use crate::api::Client;
use crate::render::sanitize::sanitize_owned;

/// The loop's handle on the metrics load in flight.
#[derive(Debug, Default)]
pub struct MetricsWorker {
    running: Option<(u64, AbortHandle)>,
}

impl MetricsWorker {
    pub fn new() -> Self {
        MetricsWorker::default()
    }

    /// Carries out one request from the app; answers go to `sink`. Without a client (not
    /// connected yet) every query of a load fails at once with that reason. Returns the task
    /// of a load it started. Must be called inside a tokio runtime.
    pub fn handle<F>(
        &mut self,
        request: MetricsRequest,
        client: Option<&Client>,
        sink: F,
    ) -> Option<AbortHandle>
    where
        F: Fn(MetricsEvent) + Send + Sync + 'static,
    {
        match request {
            MetricsRequest::Load(plan) => {
                self.abort();
                let Some(client) = client else {
                    let failed = |query| MetricsEvent::Answered {
                        load_id: plan.load_id,
                        query,
                        result: Err("not connected to the service yet".to_string()),
                    };
                    sink(failed(Query::Totals));
                    (0..plan.buckets.len())
                        .filter(|&i| !plan.known.contains(&plan.buckets[i]))
                        .for_each(|i| sink(failed(Query::Bucket(i))));
                    return None;
                };
                let id = plan.load_id;
                let task = tokio::spawn(run_load(client.clone(), plan, sink)).abort_handle();
                self.running = Some((id, task.clone()));
                Some(task)
            }
            MetricsRequest::Cancel { load_id } => {
                if self.running.as_ref().is_some_and(|(id, _)| *id == load_id) {
                    self.abort();
                }
                None
            }
        }
    }

    /// The id of the load in flight, if it has not finished.
    pub fn running(&self) -> Option<u64> {
        self.running
            .as_ref()
            .filter(|(_, h)| !h.is_finished())
            .map(|(id, _)| *id)
    }

    fn abort(&mut self) {
        if let Some((_, handle)) = self.running.take() {
            handle.abort();
        }
    }
}

impl Drop for MetricsWorker {
    fn drop(&mut self) {
        self.abort();
    }
}

/// Runs every query of `plan` (totals first), [`crate::series::CONCURRENCY`] at a time, and reports each.
pub async fn run_load<F>(client: Client, plan: LoadPlan, sink: F)
where
    F: Fn(MetricsEvent) + Send + Sync + 'static,
{
    let LoadPlan {
        load_id,
        mut range,
        granularity,
        mut buckets,
        known,
        preset,
    } = plan;
    // The app's clock may be seconds old: a preset ends at the real now.
    if let Some(preset) = preset {
        let fresh = preset.resolve(chrono::Utc::now());
        if fresh != range
            && let Ok(list) = crate::series::buckets::buckets(fresh, granularity)
        {
            range = fresh;
            buckets = list;
            sink(MetricsEvent::Replanned {
                load_id,
                range,
                buckets: buckets.clone(),
            });
        }
    }
    // Buckets the app already knows (complete ones answered before) are not asked again.
    let queries = std::iter::once((Query::Totals, range)).chain(
        (buckets.into_iter().enumerate())
            .filter(|(_, b)| !known.contains(b))
            .map(|(i, b)| (Query::Bucket(i), b.range())),
    );
    let answers = crate::series::query_all(&client, granularity, queries);
    futures_util::pin_mut!(answers);
    while let Some((query, result)) = answers.next().await {
        let result = result
            .map(Box::new)
            .map_err(|e| sanitize_owned(&e.to_string()));
        sink(MetricsEvent::Answered {
            load_id,
            query,
            result,
        });
    }
}
