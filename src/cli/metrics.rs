//! Starting the metrics endpoint beside a running core, when `--metrics` or
//! `[metrics] listen` asks for it.

use tokio_util::sync::CancellationToken;

use crate::cli::error::CliError;
use crate::core::clock::Clock;
use crate::metrics::{ProjectFeed, parse_listen, serve};
use crate::settings::Settings;

/// Serves `/metrics` for these projects until the returned token is cancelled (or the
/// process ends); `None` when no address is configured.
pub async fn start_feeds(
    settings: &Settings,
    feeds: Vec<ProjectFeed>,
    clock: Clock,
) -> Result<Option<CancellationToken>, CliError> {
    let Some(listen) = settings.metrics_listen.as_deref() else {
        return Ok(None);
    };
    let addr = parse_listen(listen).map_err(crate::cli::error::usage)?;
    let cancel = CancellationToken::new();
    let bound = serve(addr, feeds, clock, cancel.clone())
        .await
        .map_err(crate::cli::error::runtime)?;
    eprintln!("maestro: metrics on http://{bound}/metrics");
    Ok(Some(cancel))
}
