//! The HTTP endpoints: `/metrics`, `/healthz`, `/readyz`.
