//! Runs the metrics view's queries: the totals of the range and one query per bucket on
//! screen, at most [`convo_client::series::CONCURRENCY`] at a time, each answer reported as soon as it
//! arrives; buckets that scroll into view later are fetched by the same load. A new load
//! replaces the one in flight; cancelling aborts its tasks, which drops their requests.

use futures_util::StreamExt;
use tokio::task::AbortHandle;

use super::{LoadPlan, MetricsEvent, MetricsRequest, Query};
use convo_client::api::Client;
use convo_client::sanitize::sanitize_owned;

/// The loop's handle on the metrics load in flight.
#[derive(Debug, Default)]
pub struct MetricsWorker {
    /// The load in flight and its tasks (the load, then one per fetch).
    running: Option<(u64, Vec<AbortHandle>)>,
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
                    (plan.ask.iter()).for_each(|&i| sink(failed(Query::Bucket(i))));
                    return None;
                };
                let id = plan.load_id;
                let task = tokio::spawn(run_load(client.clone(), plan, sink)).abort_handle();
                self.running = Some((id, vec![task.clone()]));
                Some(task)
            }
            MetricsRequest::Fetch {
                load_id,
                granularity,
                ask,
            } => {
                let Some(client) = client else {
                    for (i, _) in ask {
                        sink(MetricsEvent::Answered {
                            load_id,
                            query: Query::Bucket(i),
                            result: Err("not connected to the service yet".to_string()),
                        });
                    }
                    return None;
                };
                let queries = ask
                    .into_iter()
                    .map(|(i, b)| (Query::Bucket(i), b.range()))
                    .collect::<Vec<_>>();
                let task = tokio::spawn(run_queries(
                    client.clone(),
                    load_id,
                    granularity,
                    queries,
                    sink,
                ))
                .abort_handle();
                match &mut self.running {
                    Some((id, tasks)) if *id == load_id => {
                        tasks.retain(|t| !t.is_finished());
                        tasks.push(task.clone());
                    }
                    _ => {
                        self.abort();
                        self.running = Some((load_id, vec![task.clone()]));
                    }
                }
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
            .filter(|(_, tasks)| tasks.iter().any(|t| !t.is_finished()))
            .map(|(id, _)| *id)
    }

    fn abort(&mut self) {
        if let Some((_, tasks)) = self.running.take() {
            tasks.iter().for_each(AbortHandle::abort);
        }
    }
}

impl Drop for MetricsWorker {
    fn drop(&mut self) {
        self.abort();
    }
}

/// Runs every query of `plan` (totals first), [`convo_client::series::CONCURRENCY`] at a time, and reports each.
pub async fn run_load<F>(client: Client, plan: LoadPlan, sink: F)
where
    F: Fn(MetricsEvent) + Send + Sync + 'static,
{
    let LoadPlan {
        load_id,
        mut range,
        granularity,
        mut buckets,
        ask,
        known,
        preset,
    } = plan;
    // The app's clock may be seconds old: a preset ends at the real now.
    if let Some(preset) = preset {
        let fresh = preset.resolve(chrono::Utc::now());
        if fresh != range
            && let Ok(list) = convo_client::series::buckets::buckets(fresh, granularity)
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
    // The buckets on screen, less those the app already knows (complete ones answered before,
    // maybe at other positions if the preset moved on).
    let queries = std::iter::once((Query::Totals, range))
        .chain(
            (ask.into_iter())
                .filter_map(|i| buckets.get(i).map(|b| (i, *b)))
                .filter(|(_, b)| !known.contains(b))
                .map(|(i, b)| (Query::Bucket(i), b.range())),
        )
        .collect();
    run_queries(client, load_id, granularity, queries, sink).await;
}

/// Runs `queries`, [`convo_client::series::CONCURRENCY`] at a time, and reports each answer.
async fn run_queries<F>(
    client: Client,
    load_id: u64,
    granularity: convo_client::api::Granularity,
    queries: Vec<(Query, convo_client::series::buckets::TimeRange)>,
    sink: F,
) where
    F: Fn(MetricsEvent) + Send + Sync + 'static,
{
    let answers = convo_client::series::query_all(&client, granularity, queries);
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
