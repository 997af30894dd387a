// Package testcell owns what a result measures and how results of one
// thing group: the headline figure of a test's result in base units
// (Headline, Measured, StatusOf; HigherIsBetter and Unit say how to read
// it), the identity of a cell (CellKey: node pair, path, test, parameters,
// IP family; KeyOf, ParamsKey, Label), and the cells' statistics with
// what is computed from them: Cells, Matrices, ByPath, Compare and
// CompareFamilies (Welch's t-test per cell), Overheads against a
// Baseline path. It sits beside internal/testspec (what a test is);
// coordinator/report only formats what this package computes.
package testcell
