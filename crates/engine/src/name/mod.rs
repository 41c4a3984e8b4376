//! Names: an op's name, carried by its record ([`OpName`]), and the names users give vars,
//! kept apart from the graph and looked up only to describe a var ([`VarNames`]).

mod op_name;
mod var_names;

pub(crate) use op_name::OpName;
pub(crate) use var_names::VarNames;
