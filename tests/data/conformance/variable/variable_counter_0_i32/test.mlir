module {
  tosa.variable @cnt = dense<-190> : tensor<i32>
  func.func @main() -> (tensor<i32> {tosa.tensor_name = "result-0"}) {
    %c = "tosa.const"() <{values = dense<3> : tensor<i32>}> : () -> tensor<i32>
    %v0 = tosa.variable_read @cnt : tensor<i32>
    %v1 = tosa.add %v0, %c : (tensor<i32>, tensor<i32>) -> tensor<i32>
    tosa.variable_write @cnt, %v1 : tensor<i32>
    %v2 = tosa.variable_read @cnt : tensor<i32>
    return %v2 : tensor<i32>
  }
}
