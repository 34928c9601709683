//! The what-if's integration tests, in one test binary: `cargo test -p
//! whatif --test checks MODULE::` runs one subject.

mod bad_input;
mod end_to_end;
mod job;
mod live;
mod record;
mod recording;
