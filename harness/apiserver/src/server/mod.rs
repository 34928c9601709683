//! The API server's operations, independent of HTTP: get, list, create,
//! update, patch, delete with the semantics of the real API server's generic
//! registry (optimistic concurrency, status subresource, generation,
//! graceful deletion, finalizers, propagation policies), plus the `scale`
//! subresource. The HTTP layer (`http/`) and the server's own controllers
//! (`gc.rs`) both call these. The server's state is in `state`, the options
//! and results of requests in `options`; one file per operation: `read`
//! (get, list), `create`, `update` (with patch), `apply`, `delete`, `scale`.

mod apply;
mod create;
mod delete;
mod options;
mod read;
mod scale;
mod state;
mod update;

pub use options::{
    DeleteOptions, Deleted, Filter, ListOptions, ListPage, PatchType, Subresource, WriteOptions,
};
pub use scale::selector_string;
pub use state::Server;
