# Conveniences over dev.py, which needs nothing but python3 (see README.md).
.PHONY: demo test bench clean
demo:
	python3 dev.py demo
test:
	python3 dev.py test
bench:
	python3 dev.py bench
clean:
	rm -rf .venv .pytest_cache .mypy_cache .ruff_cache
