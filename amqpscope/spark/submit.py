"""The driver script for `spark-submit` (the same options as `amqpscope spark`):

    spark-submit --master yarn --py-files amqpscope-X-py3-none-any.whl \\
        amqpscope/spark/submit.py hdfs:///captures/ --out hdfs:///amqp/tables

It only calls `amqpscope.spark.spark.main`, so that everything the executors run is pickled
by reference to the package shipped with `--py-files`, not by value from `__main__`.
"""

import sys

from amqpscope.spark.spark import main

if __name__ == "__main__":
    sys.exit(main())
