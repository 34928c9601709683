//! The autoscaler in-process with `--cloud-provider=aws` against an AWS API
//! emulator (moto's server mode, started here on loopback), in virtual
//! time: ASGs found by their tags scale from zero from their launch
//! template's instance type, scale back down by terminating instances, and
//! an ASG with a malformed node template tag is left alone and reported.
//!
//! Without moto (`pip install 'moto[server]'`) each test prints SKIPPED
//! and the reason; `.ci/run` installs it.
//!
//! They need the AWS SDK, built with the `aws` feature (`cargo test -p
//! conformance --features aws`); without it the test prints SKIPPED and why.

#[cfg(feature = "aws")]
mod scenarios;

#[cfg(not(feature = "aws"))]
#[test]
fn skipped_without_the_aws_feature() {
    println!(
        "SKIPPED: the aws provider against the AWS emulator needs the `aws` feature \
         (cargo test -p conformance --features aws --test checks autoscaler_aws::)"
    );
}
