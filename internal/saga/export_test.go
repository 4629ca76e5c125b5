package saga

// ListSQL is List's statement for a filter, for the plan test.
var ListSQL = listSQL
