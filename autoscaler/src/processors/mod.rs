//! Processors (upstream's `processors`): steps of the loop that upstream
//! lets a distribution replace. Here: the template node infos of every
//! node group ([`nodeinfosprovider`]).

pub mod nodeinfosprovider;
