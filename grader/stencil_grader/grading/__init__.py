"""One grading of one lab: build -> static checks -> correctness -> bench -> score -> report.

pipeline.grade_lab is the one path through these stages; the class back ends and the instructor's tools call it
(or its stages) and nothing else of a grading."""
