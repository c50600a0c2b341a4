//! The grants docs/deploy.md gives for a role that is not a superuser, on PostgreSQL 15 and
//! later: `CONNECT` alone fails with `permission denied for schema public`; `USAGE, CREATE ON
//! SCHEMA public`, or owning the database, is enough to migrate and serve.

use convo_service::{DbLocation, start};
use reqwest::StatusCode;

use super::backends::{TestDb, pg_server};
use super::common::{session, start_with};

/// A login role of its own on the test server, dropped on drop (after the databases it owns:
/// declare it before them).
struct Role {
    name: String,
}

impl Role {
    async fn create() -> Role {
        let name = format!(
            "convo_role_{}",
            convo_service::ids::random_alnum(12).to_ascii_lowercase()
        );
        admin(&format!("CREATE ROLE {name} LOGIN")).await;
        Role { name }
    }

    /// The URL of `db` as this role.
    fn url(&self, db: &str) -> String {
        let mut url = url::Url::parse(&pg_server()).unwrap();
        url.set_username(&self.name).unwrap();
        url.set_path(db);
        url.to_string()
    }
}

impl Drop for Role {
    fn drop(&mut self) {
        let name = self.name.clone();
        let _ = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(admin(&format!("DROP ROLE IF EXISTS {name}")));
        })
        .join();
    }
}

/// Runs `sql` as the superuser on the `postgres` database, or on `db`.
async fn admin_on(db: &str, sql: &str) {
    let (client, connection) =
        tokio_postgres::connect(&format!("{}/{db}", pg_server()), tokio_postgres::NoTls)
            .await
            .unwrap();
    tokio::spawn(connection);
    client.batch_execute(sql).await.unwrap();
}

async fn admin(sql: &str) {
    admin_on("postgres", sql).await
}

fn config(url: String) -> convo_service::ServiceConfig {
    let mut config = convo_service::ServiceConfig::ephemeral(0);
    config.db = DbLocation::Postgres(url);
    config
}

/// A send, its history and a deletion work for the service at `url`.
async fn serves(url: String) {
    let svc = start_with(config(url)).await;
    let sid = session();
    svc.send_text(&sid, "hello").await;
    let (status, body) = svc.get(&format!("/v1/sessions/{sid}/messages")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(svc.delete(&sid).await.0, StatusCode::OK);
    svc.service.shutdown().await;
}

#[tokio::test]
async fn on_postgresql_15_the_role_needs_create_on_schema_public_or_the_database() {
    let role = Role::create().await;
    let granted = TestDb::create().await;
    admin(&format!(
        "GRANT CONNECT, CREATE ON DATABASE {} TO {}",
        granted.name, role.name
    ))
    .await;
    // `CREATE` on the database is not enough: the schema `public` refuses.
    let err = start(
        config(role.url(&granted.name)),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .expect_err("the start fails without a grant on the schema")
    .to_string();
    assert!(err.contains("permission denied for schema public"), "{err}");
    // With the schema's grant it migrates and serves.
    admin_on(
        &granted.name,
        &format!("GRANT USAGE, CREATE ON SCHEMA public TO {}", role.name),
    )
    .await;
    serves(role.url(&granted.name)).await;

    // A database the role owns needs no grant at all.
    let owned = TestDb::create().await;
    admin(&format!(
        "ALTER DATABASE {} OWNER TO {}",
        owned.name, role.name
    ))
    .await;
    serves(role.url(&owned.name)).await;
    // The databases go first (they hold the role's objects), then the role.
    drop(owned);
    drop(granted);
    drop(role);
}
