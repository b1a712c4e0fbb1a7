# The roofline (DESIGN §5): datasheet peaks and t_min lower bounds. Included
# from evaluator/CMakeLists.txt; a separate library so the judge, the reports
# and the tests can link it without the rest of the evaluator.
add_library(korch_roofline STATIC ${CMAKE_CURRENT_LIST_DIR}/roofline.cpp)
target_include_directories(korch_roofline PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(korch_roofline PUBLIC korch_util PRIVATE korch_warnings)
