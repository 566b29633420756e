//! What a set of results says, apart from how it is drawn or printed: the
//! figure each series belongs to (`figures`), how sure a point's figure and
//! a ratio of two are (`uncertainty`), what the data shows that a reader
//! should look at (`findings`: cliffs, wide spread, error counters that
//! moved) and the headline numbers of a profile (`headlines`). `profile`
//! plans with `figures`; `report` and `compare` read the rest.

pub mod figures;
pub mod findings;
pub mod headlines;
pub mod passes;
pub mod uncertainty;
