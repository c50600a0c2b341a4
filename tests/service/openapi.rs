//! `docs/openapi.yaml` stays in step with the router: the same (method, path) pairs, every
//! documented operation answers on a live service, and both security schemes are described.

use std::collections::BTreeSet;

use convo_service::router::ROUTES;

use super::common::start_default;

const SPEC: &str = include_str!("../../docs/openapi.yaml");

/// (METHOD, path) of every operation under `paths:` (two-space indented YAML).
fn documented_operations() -> BTreeSet<(String, String)> {
    let mut ops = BTreeSet::new();
    let mut in_paths = false;
    let mut path = None;
    for line in SPEC.lines() {
        if !line.starts_with(' ') && !line.trim().is_empty() {
            in_paths = line.trim_end() == "paths:";
            continue;
        }
        if !in_paths {
            continue;
        }
        if let Some(p) = line.strip_prefix("  ").filter(|l| l.starts_with('/')) {
            path = Some(
                p.trim_end()
                    .trim_end_matches(':')
                    .trim_matches('\'')
                    .trim_matches('"')
                    .to_string(),
            );
        } else if let Some(m) = line.strip_prefix("    ").filter(|l| !l.starts_with(' ')) {
            let m = m.trim_end().trim_end_matches(':');
            if ["get", "post", "put", "patch", "delete"].contains(&m)
                && let Some(p) = &path
            {
                ops.insert((m.to_uppercase(), p.clone()));
            }
        }
    }
    ops
}

#[test]
fn the_spec_lists_exactly_the_routes_of_the_router() {
    let documented = documented_operations();
    let served: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    assert_eq!(documented, served);
}

#[test]
fn the_spec_is_openapi_3_1_with_both_security_schemes_and_every_status() {
    assert!(SPEC.starts_with("openapi: 3.1"));
    for needle in [
        "apiKey:",
        "walletJwt:",
        "bearerFormat: JWT",
        "ErrorEnvelope:",
        "Message:",
        "Metrics:",
        "Usage:",
        "Wallet:",
        "StreamEvent:",
        "Deleted:",
        "'200':",
        "'202':",
        "'400':",
        "'401':",
        "'404':",
        "'405':",
        "'413':",
        "'429':",
        "'500':",
        "'502':",
        "Retry-After",
        "Idempotency-Key",
        "context_overflow",
        "quota_exceeded",
    ] {
        assert!(SPEC.contains(needle), "docs/openapi.yaml lacks {needle}");
    }
}

/// No YAML parser is a dependency; this catches the usual mistake of hand-written YAML, a plain
/// scalar holding `: ` or ` #` (which changes its meaning or makes the file invalid).
#[test]
fn plain_yaml_scalars_hold_no_colon_space_or_comment() {
    for (n, line) in SPEC.lines().enumerate() {
        let Some((_, value)) = line.trim_start().split_once(": ") else {
            continue;
        };
        let value = value.trim();
        if value.is_empty() || value.starts_with(['\'', '"', '|', '{', '[', '>']) {
            continue;
        }
        assert!(
            !value.contains(": ") && !value.contains(" #"),
            "docs/openapi.yaml line {}: quote this value: {value}",
            n + 1
        );
    }
}

#[tokio::test]
async fn every_documented_operation_is_served() {
    let svc = start_default().await;
    for (method, path) in documented_operations() {
        let concrete = path
            .replace("{sessionId}", "session_abcdefgh12345678")
            .replace("{walletId}", "treasury");
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let resp = svc
            .http
            .request(method.clone(), svc.url(&concrete))
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let (_, body) = super::common::json(resp).await;
        let code = body["error"]["code"].as_str().unwrap_or("");
        assert!(
            code != "not_found" && code != "method_not_allowed",
            "{method} {path} is documented but not served ({status} {body})"
        );
    }
}
