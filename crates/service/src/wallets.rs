//! The wallets served by GET `/v1/wallets/{walletId}`: `assets/wallets.json`, embedded and
//! parsed once.

use std::sync::LazyLock;

use convo_wire::Wallet;

static WALLETS: LazyLock<Vec<Wallet>> = LazyLock::new(|| {
    serde_json::from_str(include_str!("../../../assets/wallets.json")).unwrap_or_else(|e| {
        // A unit test guards the fixture; a broken build still serves 404s, not a crash.
        tracing::error!(error = %e, "assets/wallets.json does not parse");
        Vec::new()
    })
});

pub fn find(wallet_id: &str) -> Option<&'static Wallet> {
    WALLETS.iter().find(|w| w.wallet_id == wallet_id)
}

pub fn all() -> &'static [Wallet] {
    &WALLETS
}

#[cfg(test)]
mod tests {
    #[test]
    fn fixture_parses_with_its_seven_wallets() {
        let ids: Vec<&str> = super::all().iter().map(|w| w.wallet_id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "treasury",
                "empty",
                "collector",
                "market-maker",
                "flagged",
                "staker",
                "new-user"
            ]
        );
        assert!(
            super::all()
                .iter()
                .all(|w| (0.0..=100.0).contains(&w.risk_score))
        );
    }
}
