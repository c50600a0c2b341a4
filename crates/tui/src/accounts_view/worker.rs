//! Carries out the accounts view's requests: the whole list, fetched page by page (a load
//! typed in the filter waits [`DEBOUNCE`] first and is dropped when a newer one came), and an
//! account's details, one metrics query per day. Answers go back through a sink.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::{AccountsEvent, AccountsRequest, AdminFailure, PAGE};
use convo_client::api::admin::AccountsQuery;
use convo_client::api::{AccountSort, AdminAccount, ApiError, Client, Granularity};
use convo_client::sanitize::sanitize_owned;

/// How long a load typed in the filter waits for the next key.
pub const DEBOUNCE: Duration = Duration::from_millis(250);

/// How the view explains a client error.
pub fn failure_of(e: &ApiError) -> AdminFailure {
    match e {
        ApiError::Config(m) if m.contains("admin key") => AdminFailure::NoAdminKey,
        ApiError::Unauthorized { message } => AdminFailure::Unauthorized(sanitize_owned(message)),
        other => AdminFailure::Other(sanitize_owned(&other.to_string())),
    }
}

/// Every account matching `q` in the order `sort`, page by page; `None` when the server has
/// no admin endpoints. Stops when the service's total is reached or a page comes back empty.
pub async fn fetch_all(
    client: &Client,
    sort: AccountSort,
    q: Option<String>,
) -> Result<Option<(u64, Vec<AdminAccount>)>, ApiError> {
    let mut rows = Vec::new();
    let total = loop {
        let query = AccountsQuery {
            sort,
            limit: Some(PAGE),
            offset: rows.len() as u64,
            q: q.clone(),
        };
        let Some(page) = client.admin_accounts(&query).await? else {
            return Ok(None);
        };
        let got = page.accounts.len();
        rows.extend(page.accounts);
        if got == 0 || rows.len() as u64 >= page.total {
            break page.total;
        }
    };
    Ok(Some((total, rows)))
}

/// The loop's accounts worker.
#[derive(Debug, Clone, Default)]
pub struct AccountsWorker {
    /// The newest load asked for: a debounced load that is no longer it is dropped.
    newest: Arc<AtomicU64>,
}

impl AccountsWorker {
    /// Carries out one request. Must be called inside a tokio runtime.
    pub fn handle<F>(&self, request: AccountsRequest, client: Option<&Client>, sink: F)
    where
        F: Fn(AccountsEvent) + Send + Sync + 'static,
    {
        let Some(client) = client.cloned() else {
            if let AccountsRequest::Load { seq, .. } = request {
                sink(AccountsEvent::Loaded {
                    seq,
                    result: Err(AdminFailure::Other(
                        "not connected to the service yet".into(),
                    )),
                });
            }
            return;
        };
        match request {
            AccountsRequest::Load {
                seq,
                sort,
                q,
                debounce,
            } => {
                self.newest.store(seq, Ordering::SeqCst);
                let newest = self.newest.clone();
                tokio::spawn(async move {
                    if debounce {
                        tokio::time::sleep(DEBOUNCE).await;
                        if newest.load(Ordering::SeqCst) != seq {
                            return;
                        }
                    }
                    let result = match fetch_all(&client, sort, q).await {
                        Ok(Some(list)) => Ok(list),
                        Ok(None) => Err(AdminFailure::Unsupported),
                        Err(e) => Err(failure_of(&e)),
                    };
                    sink(AccountsEvent::Loaded { seq, result });
                });
            }
            AccountsRequest::Details {
                seq,
                account_id,
                days,
            } => {
                tokio::spawn(async move {
                    for (index, (start, end)) in days.into_iter().enumerate() {
                        let result = match client
                            .admin_account_metrics(account_id, start, end, Some(Granularity::Day))
                            .await
                        {
                            Ok(Some(m)) => Ok(Box::new(m)),
                            Ok(None) => Err("the server has no admin endpoints".to_string()),
                            Err(e) => Err(sanitize_owned(&e.to_string())),
                        };
                        sink(AccountsEvent::Day { seq, index, result });
                    }
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_errors_map_to_what_the_view_explains() {
        let none = ApiError::Config(convo_client::api::admin::NO_ADMIN_KEY.into());
        assert_eq!(failure_of(&none), AdminFailure::NoAdminKey);
        assert_eq!(
            failure_of(&ApiError::Unauthorized {
                message: "bad\u{1b}[2J key".into()
            }),
            AdminFailure::Unauthorized("bad key".into())
        );
    }
}
